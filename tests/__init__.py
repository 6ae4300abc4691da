"""The test suite: mirrors playbook/, bot/ and webhooks/, with e2e/ for the loop through serve."""
