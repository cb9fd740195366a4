def add_api():
    pass
