"""Small arithmetic helpers."""


def add(a, b):
    return a + b


def mean(values):
    """The arithmetic mean of a non-empty list of numbers."""
    if not values:
        raise ValueError("mean of an empty list")
    return sum(values) / len(values)
