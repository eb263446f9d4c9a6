"""Figures about runs, computed in the database: used alike by pages, the API
and the command line. Scoping stays in the capabilities' selectors: these
functions take a run the caller may already see."""
