"""Batch room: manifests, the batch runner (local or Ray, one path), scores, the checklist, the regression watch."""
