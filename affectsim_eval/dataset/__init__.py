"""The episode dataset: schema and storage, composer, splits and build."""
