"""What happens to each message, for every transport: the interceptor, the journaled life of a call, tool policies.

The only place that makes a journaling decision. It may import journal/, errors, wire and signature; it never
imports a pump or a transport (proxy/, gateway/, upstream/).
"""
