"""Gradio event handlers and page layout for SpecScope (app.py wires them; no model code here)."""
