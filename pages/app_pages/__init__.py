"""The app's page scripts, listed by app.py through st.navigation."""
