"""Measurement files (no torch at import; the dashboard imports it): the nccl-tests log
importer (import_nccl_tests; rccl-tests logs too), the published-table folder importer (import_published:
logs and markdown summary tables by manifest), the measurement-CSV writer/reader and the provenance record."""
