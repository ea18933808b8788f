"""Certificate bootstrap for the webhook (cryptography)."""
