"""Local HTTP servers that speak the GitHub and Jira REST shapes and record every request."""
