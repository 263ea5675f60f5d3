import csv


def total(path):
    with open(path) as handle:
        return sum(float(row["sales"]) for row in csv.DictReader(handle))


if __name__ == "__main__":
    print(total("data/sales.csv"))
