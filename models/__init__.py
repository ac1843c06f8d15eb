"""Offline demo models shipped with LIMEcraft."""
