"""Model providers behind one seam (see ``providers.base``); SDK adapters load their SDK lazily."""
