"""Backend-API checks: see hipdnn_cabi/conformance/backend_driver.c."""
