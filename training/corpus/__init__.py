"""The En-De software corpus from Debian's German gettext catalogs (python -m training.corpus)."""
