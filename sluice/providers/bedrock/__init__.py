"""AWS Bedrock Runtime through its Converse API (``aws-bedrock`` connections).

``request`` turns our request into a Converse body, ``stream`` reads ConverseStream's
event-stream frames (framing in :mod:`sluice.wire.eventstream`), ``mapping`` holds
Bedrock's stop reasons, usage and error types in our terms, ``adapter`` ties them to
the adapter interface.
"""

from sluice.providers.bedrock.adapter import BedrockAdapter as BedrockAdapter
