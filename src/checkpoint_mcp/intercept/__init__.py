"""What happens to each message, for every transport (the layout move brings the interceptor here)."""
