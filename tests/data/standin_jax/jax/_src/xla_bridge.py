def backends_are_initialized():
    return True
