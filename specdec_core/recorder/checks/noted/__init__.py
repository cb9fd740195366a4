"""What the normalizers noted, made findings (normalize/ never emits one)."""
