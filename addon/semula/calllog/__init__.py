"""The Parquet call and review logs the notebooks read: their schemas (`schema`), the buffered
writer (`writer`) and the reader that counts hit rates (`reader`).

Independent of the store: it imports no other semula package. The proxy builds each call's row (`proxy/call/calllog.py`).
"""
