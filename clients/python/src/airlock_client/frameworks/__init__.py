"""airlock as the sandbox behind agent frameworks: each of airlock's tools offered as the
framework's own kind of tool, every call made through ``Tools.ExecuteTool`` with the daemon's
policy and approvals, its status told to the model the way the framework tells tool errors.

- :mod:`airlock_client.frameworks.langchain`: LangChain / LangGraph tools
  (``pip install 'airlock-client[langchain]'``).
- :mod:`airlock_client.frameworks.openai_agents`: OpenAI Agents SDK function tools
  (``pip install 'airlock-client[openai-agents]'``).

Any other framework that speaks MCP reaches the same tools through airlockd's MCP endpoint
(``airlockd --mcp-listen``); see the package's README.
"""
