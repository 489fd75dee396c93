"""Pipeline timeline models: host-side arithmetic, never imported inside kernels."""
