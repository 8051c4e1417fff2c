"""The operator's web pages: workflows, a workflow's timeline, a call with its resolve forms.

``app.create_app`` is the Starlette app (mountable under any path); ``server.serve_ui`` is
`checkpoint journal ui`. Everything is read and written through ``journal.operations``; no SQL here.
"""
