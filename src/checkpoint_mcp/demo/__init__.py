"""`checkpoint demo`: a scripted agent, a mail server with visible side effects, a crash and a restart."""
