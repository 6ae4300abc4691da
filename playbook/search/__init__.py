"""Search: engineering text, the BM25 index, ranking formulas, and retrieval for a ticket."""
