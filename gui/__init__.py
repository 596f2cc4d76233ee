"""The devmon desktop GUI (PySide6): the only package that imports Qt."""
