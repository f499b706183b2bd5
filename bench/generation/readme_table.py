"""Rewrites the text between a README's `<!-- NAME:begin -->` and `<!-- NAME:end -->` markers (the tables the
bench/generation scripts regenerate)."""


def replace_between_markers(path: str, name: str, text: str) -> None:
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    with open(path) as f:
        readme = f.read()
    if begin not in readme or end not in readme:
        raise SystemExit(f"{path}: the markers {begin} and {end} are missing")
    head, rest = readme.split(begin, 1)
    _, tail = rest.split(end, 1)
    with open(path, "w") as f:
        f.write(head + begin + "\n" + text + end + tail)
