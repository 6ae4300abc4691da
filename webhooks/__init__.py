"""The HTTP edge: Flask app that verifies, persists and acknowledges webhook deliveries."""
