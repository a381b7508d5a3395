"""The TF1 training API built on the framework: variables and variable scopes, Saver and
its checkpoint format, monitored sessions, coordinators, device setters.

See docs/architecture.md for the layers and what each module owns.
"""
