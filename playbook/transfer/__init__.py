"""Transfer: importing and exporting playbooks and usage logs."""
