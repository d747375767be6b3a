"""Measurement files (no torch at import; the dashboard imports it): the nccl-tests log
importer, the measurement-CSV writer/reader and the provenance record."""
