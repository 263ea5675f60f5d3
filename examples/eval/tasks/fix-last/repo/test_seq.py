from seq import last

assert last([1, 2, 3]) == 3
print("ok")
