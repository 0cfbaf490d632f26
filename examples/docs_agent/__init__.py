"""An example documentation agent for sensei-eval's optimize/validate loop (see README.md here).

`make_agent()` (in `agent.py`) builds a pydantic-ai agent with Context7/Scout/Tavily-shaped tools over a
local corpus and, with no model configured, a scripted model that follows the rules it finds in its
system prompt — so the whole loop runs offline, repeatably, with no API key.
"""
