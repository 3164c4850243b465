"""Jinja templates of hpcjax; shipped inside the wheel as hpcjax.templates."""
