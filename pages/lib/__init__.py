"""Shared glue for the app pages: session state, caches, the sidebar and common views."""
