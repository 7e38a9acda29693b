"""`semula report`: the HTML report over the call log. Imports no other semula package."""
