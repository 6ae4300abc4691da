"""Rule files agents already read (AGENTS.md, CLAUDE.md, ...): parsing, import, managed block."""

# The managed block the bot keeps in a rule file. Text between these markers is the bot's;
# everything outside them is the team's and is never touched. The importer skips the block
# (the bot's own lessons must not come back as new ones).
START = "<!-- playbook-bot:start -->"
END = "<!-- playbook-bot:end -->"
