from .papers import plot_trace

__all__ = ["plot_trace"]
