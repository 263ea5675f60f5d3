import json

config = json.load(open("config.json"))
print(f"{config['name']} times out after {config['timeout_s']} s")
