"""Adapters of the SDK to the frameworks users already run, each an optional extra:
`docingest[langchain]` (`langchain.DocingestRetriever`), `docingest[llamaindex]`
(`llamaindex.DocingestRetriever`) and `docingest[mcp]` (`mcp.build_server`, `docingest mcp`).

Each returns the same things for a hit (`source.hit_fields`): the excerpt (or the chunk's text
where the server gives none), the source (document, filename, pages, headings) and the scores.
"""
