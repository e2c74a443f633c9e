"""worthit: is this LLM-serving optimisation worth it on my hardware?"""

__version__ = "0.1.0"
