"""Built-in plans (YAML files beside this module)."""
