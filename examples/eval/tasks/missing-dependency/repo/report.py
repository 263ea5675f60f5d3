ROWS = [("north", 10), ("south", 5)]


def render(rows):
    return "\n".join(f"{name}: {value}" for name, value in rows)


if __name__ == "__main__":
    print(render(ROWS))
