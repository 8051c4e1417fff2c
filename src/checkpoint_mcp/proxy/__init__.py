"""The journaling proxy: a byte relay between the client and the upstream, with tools/call interception."""
