"""The playbook domain: bullets, their usage events and revisions, retrieval and upkeep."""
