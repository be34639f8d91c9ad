"""Command modules, one per area; `carryall.cli` assembles them."""
