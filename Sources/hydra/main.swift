print("hydra")
