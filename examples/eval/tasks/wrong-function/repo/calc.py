def calc_total(amounts):
    return sum(amounts)
