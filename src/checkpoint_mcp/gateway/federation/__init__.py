"""Many upstreams behind one endpoint (`checkpoint serve --upstreams FILE.toml`): one session or workflow, one
``Channel`` per upstream.

A ``Federation`` stands where a single ``Channel`` stands for the endpoint (both are a ``backend.Backend``), and
routes each message to the channel of the upstream it is for. Each member channel has its own interceptor, its own
workflow in the journal (``<workflow>/<upstream>``: a workflow's calls to ``mail`` and to ``github`` are numbered
apart) and its own tool policy, so replays, repeats and in-doubt calls are per upstream, and limits count each
upstream's tools by their prefixed names; the federation makes no journaling decision.

* ``router`` (the ``Federation``): ``tools/call`` and ``prompts/get`` are routed by their prefix
  (``<upstream>__<name>``, ``upstreams_file.SEPARATOR``), which is taken off on the way up (the upstream and its
  journal see the upstream's own name: the only edit besides the gateway's id renaming); ``resources/read`` and
  subscriptions go to the upstream whose list holds the URI (or whose template's fixed start matches it). A
  request whose client closed its stream (2026-07-28) is cancelled at its member and forgotten.
* ``lists``: ``tools/list``, ``prompts/list``, ``resources/templates/list`` (and ``resources/list``) are asked of
  every member and merged, names prefixed; ``initialize`` (and 2026-07-28's ``server/discover``) is answered by
  the federation: the members' capabilities merged, the gateway's own name; each member got the client's own
  ``initialize`` first.
* ``aliases``: a server request of a member (sampling, elicitation, roots) reaches the client under a new id
  (``checkpoint-fed-N``), so the answer goes back to that member with its own id.
* ``members``: an upstream that cannot start or answer is left out (of lists, with a warning), the others keep
  working, and it is started again at a later request once ``FederationHealth`` says it answers again (or its
  back-off passed).
* ``own_requests``: the requests the gateway sends a member on its own (``ask``); ``replies``: the lines it
  answers with itself.
"""

from checkpoint_mcp.gateway.federation.members import FederationHealth
from checkpoint_mcp.gateway.federation.own_requests import AskFailed, ask
from checkpoint_mcp.gateway.federation.router import Federation

__all__ = ["AskFailed", "Federation", "FederationHealth", "ask"]
