"""The Lessons page (issue 16): lesson definitions and questions (``catalog``, no streamlit), the
page (``page``, streamlit) and the PDF handout (``handout``)."""
